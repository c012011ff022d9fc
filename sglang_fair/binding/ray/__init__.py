"""SGLang's Ray backend (``--use-ray``): ``backend`` starts or joins Ray with our settings for the scheduler actors.

It runs in the main process, which under Ray also hosts the data-parallel
controller; the schedulers run as Ray actors with the ``scheduler`` package.
"""
