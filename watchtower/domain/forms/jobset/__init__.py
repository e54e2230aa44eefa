"""JobSets (and the TrainJobs that own them), read for the owner of their child Jobs' pods."""
