# Image for the app and GPU workers. Install a CUDA build of torch first, then CoopLab.
FROM python:3.11-slim
WORKDIR /opt/cooplab
# bubblewrap: the OS boundary around model-written code (the code sandbox refuses to run without it)
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap && rm -rf /var/lib/apt/lists/*
# The default Linux torch wheel is a CUDA build; pin the version your driver supports.
RUN pip install --no-cache-dir "torch>=2.6"
COPY pyproject.toml README.md ./
COPY transcripts transcripts
COPY engine engine
COPY db db
COPY jobs jobs
COPY app app
COPY cooplab cooplab
COPY bench bench
RUN pip install --no-cache-dir ".[postgres,gpu,s3]"
ENV COOPLAB_HOME=/data
EXPOSE 8501
CMD ["cooplab", "up"]
