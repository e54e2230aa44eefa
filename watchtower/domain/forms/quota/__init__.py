"""The quota form: work a ResourceQuota refuses, seen through its controllers' FailedCreate events."""
