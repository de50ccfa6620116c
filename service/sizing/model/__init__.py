"""Reading a model: config.json to a `ModelArchitecture`, its tensors, towers, parameter
count, weight formats and dtypes, weight bytes, and the plain-data form the catalog stores.
No engine's rules live here."""
