"""Reusable Streamlit building blocks shared by the views."""
