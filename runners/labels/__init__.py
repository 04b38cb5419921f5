"""Attribute judges: taxonomy instructions and requests (`protocol`), the strict JSON
parser (`parsing`), the recorder into `label_calls` (`recorder`) and the CLIP
zero-shot label baseline (`clip_labels`).
"""
