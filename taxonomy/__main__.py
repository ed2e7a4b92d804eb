from taxonomy.cli import main

main()
