"""drakit's chaos soak: the whole stack under a seeded workload and seeded faults, judged by an
independent checker (``soak.checker``). Entry points: ``make soak``, ``python -m soak``."""
