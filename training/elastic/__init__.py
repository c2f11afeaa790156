"""The elastic runtime: process group setup, peer heartbeat, preemption, clean process exit, warm imports."""
