"""Syntax of the kernel language: grammar, AST, parser, spans and diagnostics."""
