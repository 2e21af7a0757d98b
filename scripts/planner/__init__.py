"""The planner's calibration of a machine or cluster and the check of its plans against runs."""
