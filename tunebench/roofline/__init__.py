"""The decode roofline: bytes a decode step must read over the device's memory bandwidth
(docs/roofline.md)."""
