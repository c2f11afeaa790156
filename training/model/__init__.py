"""The model: GPT-2 construction, the training forward and loss, memory check, hub access, export."""
