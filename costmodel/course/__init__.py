"""The course's own material, shipped as package data: the notebooks of section 06
(course/notebooks/NN_name.py sources and their executed .ipynb)."""
