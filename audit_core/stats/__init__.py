"""Resampling shared by every judge kind: bootstrap schemes and the study's seeded draws.

Pure numpy; imports nothing else from the project.
"""
