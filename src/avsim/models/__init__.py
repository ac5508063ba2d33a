"""Multi-view Cosmos-Transfer2.5 DiT, control branch, Wan2.1 VAE, samplers and pipeline."""
