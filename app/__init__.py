"""The Streamlit dashboard (reads through db, controls runs through jobs.client; never imports torch)."""
