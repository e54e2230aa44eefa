"""Running what the composition root built: the evaluation tick (`TickLoop`), the serve loop (`serve`), the
leader's jobs, the weekly report's job, the configuration reload, the event loop's
lag (`LoopLagMonitor`), the signals and the way out (`Stopping`).

It sits between the commands and the composition root: it asks `watchtower.bootstrap` for the parts it
runs and builds no adapter of its own beyond the scheduler, the HTTP server and the senders it hands them."""
