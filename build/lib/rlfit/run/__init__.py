"""Running a training: building the learner, the host loop, session wiring, restore, resume, evaluation, stopping."""
