"""The deployment bundle: what a robot-side loop needs beside the ONNX policy (deploy.yaml and the ONNX file's
metadata), generated from the run's environment, model and config (`build`), read without JAX (`schema`)."""
