"""The run's compile cache: what torch.compile produced travels with the run.

A cold `torch.compile` spends its time generating and building code that the compiler keeps in its
on-disk cache (TORCHINDUCTOR_CACHE_DIR, by default /tmp/torchinductor_$USER; Triton's kernels lie
under it too unless TRITON_CACHE_DIR says otherwise). That cache is local to the machine, so a
replacement pod on a new node paid the whole compile again. Here:

- blob.py: after the first compiled step, the files the compile wrote are packed into
  RUN_DIR/compile_cache.tar.gz (atomically, size-bounded, never when the disk is short) and
  uploaded with the run's files to --snapshot-uri; any later start of the run unpacks them into the
  local cache before its first compile, when torch, Triton, Python and the device are the same.
  A foreign, damaged or truncated blob is ignored with one line.
  Inductor's precompiled C++ header is built in the compiler's cache directory, so it travels too.
- regions.py: what is compiled: each transformer block (one graph for all) and the head with its
  loss (the default: a cold compile that does not grow with the depth, graphs that do not depend on
  DDP), or the whole model with its loss (TRAINSTACK_COMPILE_REGIONS=0).
- plan.py: whether `--compile auto` compiles, what the console says about it, and the compile's
  seconds kept out of the progress ETA.
- background.py: a cold compile behind eager steps: a child process fills the compiler's caches
  while the trainer steps eagerly; the trainer then compiles from them and switches.
"""
