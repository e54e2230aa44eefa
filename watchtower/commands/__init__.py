"""What the command line runs: the service, the demo, the generators, the reports; each builds through the composition root."""
