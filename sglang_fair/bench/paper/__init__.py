"""The papers' evaluations, figure by figure, on the simulator (``python -m sglang_fair.bench paper``).

One module per paper (``dlpm_traces``/``dlpm_sweeps``, ``vtc``, ``apps``) defines its figures;
``figure`` holds what a figure is and how it runs, ``claims`` turns a figure's measured numbers
into one row of the claims table, ``registry`` names them all, ``cli`` is the command.
"""
