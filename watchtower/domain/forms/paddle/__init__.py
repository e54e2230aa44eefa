"""PaddleJobs that wait before their pods (paddle-operator)."""
