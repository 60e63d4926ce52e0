"""Benchmarks record the machine they ran on in the saved JSON."""

import os
import platform


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info["agentgym"] = {
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
    }
