"""Attribute judges: taxonomy instructions and requests (`label_protocol`), the strict JSON
parser (`label_parsing`), the recorder into `label_calls` (`label_recorder`) and the CLIP
zero-shot label baseline (`clip_labels`).
"""
