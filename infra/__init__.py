"""The Pulumi program: components and the function that wires them from a StackConfig."""
