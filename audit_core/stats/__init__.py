"""Resampling shared by every judge kind: bootstrap schemes, the study's seeded draws and the
settings every interval is computed under (`resampling.Resampling`: resamples and seed as one value).

Pure numpy; imports nothing else from the project.
"""
