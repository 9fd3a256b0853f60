"""The memory model: where llama.cpp puts each weight, the KV cache and compute buffers it allocates."""
