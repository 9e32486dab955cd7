"""Compile instruments: what torch.compile does over a training run, as data and views."""
