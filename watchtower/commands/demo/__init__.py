"""`watchtower demo`: the service on a simulated cluster, its sinks, its past week and the script it plays."""
