"""The model against measured hardware: public profiles and their converters, calibration, the
roofline screen, scoring per GeMM and per whole batch, and the reports of ``llmq validate``."""
