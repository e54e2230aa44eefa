"""Alerting, Alertmanager-style: rules, lifecycle, silences, inhibition, routing, grouping, notify decisions.

Pure: nothing here reads a clock or touches the outside world; `now` is always passed in.
"""
