"""What the scheduler's messages say: their kinds (`types`) and their reading (`scheduler`); the forms'
own messages are with their forms (forms.dra.messages, forms.gangs.messages)."""
