"""Engine profiles: how vLLM, SGLang and TensorRT-LLM turn memory into KV blocks."""
