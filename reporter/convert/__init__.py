"""Building TFLite variants: TensorFlow's converter, the calibrate-once quantizer, LiteRT Quantizer, repair rungs."""
