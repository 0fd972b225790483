"""Reading and writing messages: the only layer that knows provider formats.

Block kinds, tool calls and results in every format, the units a list splits into,
the pipeline's marks, references to replaced content, and the edits that cut text,
arguments and blocks.
"""
