"""The self-service page at `/`: plain HTML, a little JavaScript and CSS, shipped as files."""
