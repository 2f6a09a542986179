"""Recorded: answer load points from an earlier run's recorded points, without a server."""
