"""Policy files: the four kinds as schemas, and loading files into a compiled PolicySet."""
