"""One runner for every LLM call; providers for Gemini (API key or Vertex) and OpenAI-compatible servers."""
