"""The weekly fairness report as people read it: the words and numbers it prints (`view`), its charts
(`charts`, the only matplotlib user), its CSV (`csv_export`), and the HTML, text and email forms
(`presenter`, with `templates/`); and a policy replay's page (`replay_page`), in the same style.
"""
