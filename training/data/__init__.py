"""Data: reading text (sources), tokenizers, `prepare` into shards, and the token windows `train` reads."""
