"""What a project or a person adds in files: slash commands from Markdown, what a command does when
it runs, sub-agents from agent files."""
