"""Rating judges: rubric instructions and requests (`rating_protocol`), the rating parser
(`rating_parsing`) and the recorder into `rating_calls` (`rating_recorder`).
"""
