"""Placeholder: being written."""
import streamlit as st
from attnviz import ui

src = ui.current()
st.title("heads")
tr = ui.get_trace(src)
if tr is not None:
    st.write(tr.summary())
