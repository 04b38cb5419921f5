"""Rating judges: rubric instructions and requests (`protocol`), the rating parser
(`parsing`) and the recorder into `rating_calls` (`recorder`).
"""
