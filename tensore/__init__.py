"""tensore: an executable hardware model of the NeuronCore PE engine (TensorE)."""
__version__ = "0.1.0"
