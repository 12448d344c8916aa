"""Strict JAX settings for the test suite (the library itself never touches jax.config)."""
import jax

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_rank_promotion", "raise")  # catches accidental broadcasting
jax.config.update("jax_num_cpu_devices", 2)  # sharding is testable on CPU
