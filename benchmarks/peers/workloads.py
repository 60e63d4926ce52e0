"""The work both sides run, as plain data: imported by the agentgym side and, by path, by
the peer side (which runs in its own virtualenv and never imports agentgym)."""

SNIPPETS = {
    "arith": "print(1 + 1)",
    "pandas_sum": "import pandas as pd\nprint(pd.DataFrame({'a': range(1000)}).a.sum())",
    "json_sort": "import json\nprint(json.dumps(sorted(range(200), reverse=True))[:20])",
}
STATE_PROBE = ("x = 41", "print(x + 1)")  # a stateful tool prints 42 for the second call
CALLS_PER_SNIPPET = 20
