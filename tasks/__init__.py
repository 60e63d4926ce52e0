"""Task sources: generators of questions with hidden solutions, and their graders.

``tasks`` holds no environment logic and imports nothing from ``agentgym``,
``sandboxes`` or ``baselines``; envs turn these tasks into episodes.
"""

__all__: list[str] = []
